"""The trainer: a validated config, the learning-rate and checkpoint schedules, and the loop."""
