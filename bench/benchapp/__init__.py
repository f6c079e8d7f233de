"""The bench's installed app: its ``tasks`` module holds the no-op task."""
