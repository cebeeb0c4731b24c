"""Statistical comparison of search methods: paired tests, aggregate metrics, anytime curves."""
