CREATE TABLE Delivery (
  delivery_id INT PRIMARY KEY,
  customer_id INT,
  order_date DATE,
  customer_pref_delivery_date DATE
);
