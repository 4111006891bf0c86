"""Campaigns: the run matrix (sweep), the stored-run table and the leaderboard with its analyses."""
