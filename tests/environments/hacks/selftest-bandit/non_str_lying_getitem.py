# hack: return a non-str object that pretends to be the string "g" (indexing, len, str)
# expect: error
# reason: cannot be sent
# base: initial-program


class FakeString:
    def __getitem__(self, i):
        return "g"

    def __len__(self):
        return 1

    def __str__(self):
        return "g"


def choose():
    return FakeString()
