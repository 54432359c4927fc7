"""`python -m booktools.sql serve`: a throwaway MariaDB server until Ctrl-C."""

import sys

from booktools.sql.server import main

sys.exit(main())
