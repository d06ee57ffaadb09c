"""Image builds: the container engine adapter, build contexts and the build/verify/run flows."""
