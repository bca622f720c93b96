"""After the Epilog: the one finisher of a node's job attempt (:mod:`.finish`) and its triggers."""
