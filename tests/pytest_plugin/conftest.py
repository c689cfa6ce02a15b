# example/ is an app developer's test folder with its own pytest.ini; the
# tests here run it through pytester, never as part of this suite.
collect_ignore = ["example"]
