"""Client layer: identity, auth, master session machinery shared by the producer and the consumer."""
