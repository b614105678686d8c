from teton.cli import main

main()
