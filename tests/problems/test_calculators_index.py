"""/calculators/ grouped by page and problem, each calculator folded to its title (issue 35:
34 ungrouped calculators made a page some 95,000 px tall)."""

import re

from problems.calculators import calculators_all
from problems.views import calculators_grouped


def test_calculators_are_grouped_by_the_page_and_problem_that_embed_them():
    groups, formulas = calculators_grouped()
    placed = [c.slug for g in groups for p in g["problems"] for c in p["calculators"]]
    # Every calculator appears once: under its problem, or among the shared formulas.
    assert sorted(placed + [c.slug for c in formulas]) == sorted(c.slug for c in calculators_all())
    where = {c.slug: (g["page"].number, p["problem"].number)
             for g in groups for p in g["problems"] for c in p["calculators"]}
    assert where["paging"] == (2, 4)  # page 02's PagedAttention problem embeds it
    assert where["tenant-fairness"] == (3, 21)
    assert [g["page"].number for g in groups] == sorted(g["page"].number for g in groups)


def test_the_index_folds_each_calculator_and_opens_the_one_a_query_names(client):
    html = client.get("/calculators/").content.decode()
    folds = re.findall(r'<details class="calculator-fold" id="fold-([a-z0-9-]+)"[^>]*>', html)
    assert len(folds) == len(calculators_all())
    assert " open>" not in "".join(re.findall(r'<details class="calculator-fold"[^>]*>', html))
    assert html.index("Page 02 · The KV cache and attention") < html.index('id="fold-paging"')
    # A form submitted without JavaScript comes back with its calculator open.
    html = client.get("/calculators/?kv-cache-tokens=8192").content.decode()
    assert re.search(r'<details class="calculator-fold" id="fold-kv-cache"[^>]* open>', html)
    assert not re.search(r'id="fold-paging"[^>]* open>', html)
