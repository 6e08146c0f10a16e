"""Steps: where each training step begins and ends (`boundaries`: explicit markers, else `inference` from the
trace's repeating shape), which phase each step is in (`phases`: warm-up, recompiling, evaluation, training; the
steady steps every per-step figure uses) and what each steady step is made of (`breakdown`: host, device,
collectives, idle)."""
