import sys

from jr2_actors.cli import main

sys.exit(main())
