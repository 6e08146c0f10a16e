"""Chrome/Kineto JSON (`.json`, `.json.gz`): `reader.load_kineto_json` reads a file. The compiled scanner
(`_jscan`, optional) or the Python path (`_scan`, `_read`, `_typed`, `_values`) cut it into pieces read in
parallel (`_parallel`); `_events`, `_flows`, `_pairs` and `_convert` turn them into the model; `fill` resolves
names and stacks (shared with the Explorer reader); `restore` gives back the values the JSON exporter wrote;
`_repair` reads damaged files as far as they go."""
