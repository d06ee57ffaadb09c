"""Talking to the world upstream of the matrix: package indexes (`outdated`) and container registries (`pin`).

Everything here reads the matrix model and asks the network through one session object it is given, so tests
pass fakes and the command line passes a `requests.Session`. Nothing else in accelenv opens a connection to an
index or a registry (building and pushing images goes through the container engine, in `build/`)."""
