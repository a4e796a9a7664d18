"""The Graph500 BFS benchmark on a prepared graph: roots (:mod:`.roots`), timed searches and the report
(:mod:`.driver`), the five validation rules (:mod:`.validate`) and the reference implementation's
statistics (:mod:`.statistics`).
"""
