"""Usage: what every model call cost, and the budgets that bound it (issue 40, items 4 and 5).

Each call's tokens are kept as a transaction (`UsageRecord`: the user, the session, the branch
and the turn it served, the model, its tokens and the price at the time): a turn's calls, and
the summaries and titles made for a session, since they are calls too. A price per model
(`ModelPrice`, per million tokens, set in the admin) gives each its cost. A budget (`Budget`)
bounds a user's, or a group's, usage per day or month, in tokens or in money: a turn that would
start over one is refused before the model is called (`budget_check`), a turn already running
finishes and its cost counts. Administrators are exempt unless a budget says otherwise.
"""
