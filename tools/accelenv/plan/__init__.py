"""Plans: pure functions from the matrix model to files (locks, Dockerfiles, env.json) and sessions."""
