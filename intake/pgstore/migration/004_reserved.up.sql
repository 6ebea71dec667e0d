-- 004: reserved. The branch that added strict chat order (005) was written
-- beside another change that takes number 004; this placeholder keeps the
-- numbering without gaps until the two meet, and changes nothing.
SELECT 1;
