"""Steps: where each training step begins and ends (`boundaries`: explicit markers, else `inference` from the
trace's repeating shape) and what each steady step is made of (`breakdown`: host, device, collectives, idle)."""
