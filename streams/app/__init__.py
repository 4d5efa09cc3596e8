"""The Faust layer: topics, the changelog-backed table and one thin agent."""
