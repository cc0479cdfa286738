"""Delta tables as ivm keeps them: what a table's log records (versions, ivm's commit
metadata, ids), when the history a refresh needs is gone, and the compare-and-swap that
makes every commit to a stage table safe against a second refresh."""
