import sys

from specdec_teacher import main

sys.exit(main())
