package operator

// CutUTF16 exposes cutUTF16 to tests.
var CutUTF16 = cutUTF16
