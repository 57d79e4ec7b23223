"""What the commands show: text tables, JSON and the HTML report; no formulas here."""
