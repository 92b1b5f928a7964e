import sys

from lab import heap

with heap.loading():
    from lab.cli import main

code = main()
heap.settle(collect=False)  # interpreter exit then skips walking the libraries' objects (~1.5 s)
sys.exit(code)
