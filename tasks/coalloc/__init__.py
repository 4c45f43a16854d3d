"""Co-allocation what-if (Frank ch. 2): pair table, batch replay of synthetic queues and real traces."""
