"""Alert rules and expressions, the pure state machine, silences, the outbox and the
notifiers."""
