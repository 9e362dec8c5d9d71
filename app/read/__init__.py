"""The read side for the API, the UI and the CLI: windows, fleets, reports."""
