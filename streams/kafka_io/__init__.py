"""Talking to a Kafka cluster: connection diagnosis, security, topics, the partitioner,
publishing traces and reading outputs, and the privacy scan of what was written."""
