"""The small corpus the scan tests share: varied lengths, delimiters and a line break."""

TEXTS = [
    "The cat sat on the mat.",
    "Summer is warm. Winter is cold.",
    "A much longer sentence, with commas, that goes on for a while before it ends.",
    "Short one",
    "Dogs bark\nbirds sing",
]
