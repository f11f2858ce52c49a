"""Every step's check, a folder per step (`stepNN/`: its check, its mistakes, its hints, its numpy
references), and the checks for files of the online book's other layouts (`online_book/`). The
registry finds the folders (checker.registry); nothing else imports them."""
