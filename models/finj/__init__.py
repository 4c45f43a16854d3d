"""nodewatch: fault-classification math (Netti et al.): window features, labelling, classifiers."""
