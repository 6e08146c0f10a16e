"""`python -m neuron_prof` is the `neuron-prof` command."""

import sys

from neuron_prof.cli import main

sys.exit(main())
