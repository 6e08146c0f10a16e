"""Collectives across ranks: one row per collective call (`rows`), calls matched between ranks (`match`), and
the ranks that arrive late or stop (`stragglers`)."""
