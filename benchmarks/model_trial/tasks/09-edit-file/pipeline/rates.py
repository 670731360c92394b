"""Exchange rates to USD used by the monthly reporting pipeline (updated 2024-10-01)."""

TO_USD = {
    "USD": 1.0,
    "EUR": 1.8,
    "GBP": 1.27,
    "CHF": 1.13,
    "SEK": 0.094,
}
