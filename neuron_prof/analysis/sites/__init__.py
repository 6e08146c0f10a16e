"""Call sites: the user's line behind each event. `callsites` is the one attribution (host op -> user frame,
a backward op -> its forward line via `backward`), `host` the host-op rows, `nesting` the parent/child links,
`lines` the per-line cost table and `source` the source text shown beside a line."""
