from sepsti.cli import main

main()
