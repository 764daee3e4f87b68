"""What training optimises and reports: the label-smoothed loss (section 5.4), metrics and the
learning-rate schedule of equation 3."""
