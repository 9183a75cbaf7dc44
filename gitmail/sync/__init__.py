"""Mail across machines through git remotes: the remotes a mailbox syncs with, the quick check that answers a sync
with nothing to do, the engine that fetches, reconciles and pushes, and the background auto-sync."""
