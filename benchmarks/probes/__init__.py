"""What a model or a finished run does, looked at closely: checkpoint windows, parser beams, tagging,
verbatim spans, the span parser's wiring, a parsing run's report."""
