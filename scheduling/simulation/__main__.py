import sys

from scheduling.simulation.cli import main

sys.exit(main())
