"""python -m geoanalyze"""

from .cli.app import main

main()
