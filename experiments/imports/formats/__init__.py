"""One parser per tool result format; each says which tool version it was checked against."""
