"""The course kit of specdec_lib: what the course needs besides the library.

- `checks`: the exercises' checkers and the quick-check questions (the notebooks import them);
- `student`: the student notebooks and website, without solutions (`make student`);
- `grade`: the course grader, answers judged outside the students' kernels;
- `nbgrader_course`, `nbgrader_judge`: an nbgrader course graded by the same judge;
- `check_site`: every page of a built site in headless Chromium (`make check-site`).

The library installs without it (`pip install .`); this kit installs with `pip install course/`.
"""
