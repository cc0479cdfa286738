"""Running plans on Spark: version pinning, change capture, commits, recovery, checks."""
