"""GlusterFS, as every procedure on GlusterFS nodes sees it: the activity names and call options
(:mod:`.calls`), the pure assessment of bricks, peers and heal info (:mod:`.assess`), its models
(:mod:`.models`), the health gate (:mod:`.health`) and what a procedure leaves changed in
GlusterFS (:mod:`.left`)."""
