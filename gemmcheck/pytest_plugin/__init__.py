"""The pytest plugin: options, session object, fixtures, skips, shards, GPUs per worker."""
