// Package view builds the web viewer's read models from a run: a group's
// tree with its summary (ViewGroup), one trajectory with its token figures
// and path scores (ViewTrajectory), branches side by side from their fork
// (ViewBranches), node search (Search), rubric pages (Rubrics) and the
// environment steps per step (EnvSteps). Each reads one run in the
// caller's transaction and only reads; the server sends what it returns.
// Figures a run's summary or package replay owns (a group's zero-variance
// flags, leaves, mean reward) are taken from there, not recomputed.
package view
