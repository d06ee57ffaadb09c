"""Talking to the world upstream of the matrix: package indexes (`outdated`) and container registries (`pin`).

Everything here reads the matrix model and asks the network through one session object it is given, so tests
pass fakes and the command line passes `netio.session()`; every exchange goes through `accelenv.netio`, which
bounds it in time and size. Besides these, only `build/` talks to registries (the OCI index publisher) and
archives (the locked .debs), through `netio` too; building and pushing images goes through the container engine."""
