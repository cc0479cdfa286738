INSERT INTO customers VALUES
  (1, 'Ada', 'UK'), (2, 'Grace', 'US'), (3, 'Edsger', 'NL'), (4, 'Barbara', 'US');

INSERT INTO products VALUES
  (10, 'Keyboard', 'hardware', 49.90), (11, 'Mouse', 'hardware', 19.50),
  (12, 'IDE licence', 'software', 120.00), (13, 'Compiler book', 'books', 35.25);

INSERT INTO orders VALUES
  (100, 1, 10, 1, 'shipped'), (101, 1, 13, 2, 'shipped'), (102, 2, 12, 1, 'pending'),
  (103, 3, 11, 3, 'shipped'), (104, 4, 10, 1, 'cancelled'), (105, 2, 11, 1, 'shipped');
