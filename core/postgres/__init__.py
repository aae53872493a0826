"""Django's PostgreSQL backend with a pool that tells an unreachable server from a busy pool
(see `base`). Settings: ENGINE "core.postgres"."""
